# Sourced by scripts/demo.sh and scripts/stack.sh. bold HEAD [TAIL]: one line, HEAD in bold and
# TAIL plain, on a terminal; the same line without control codes in a pipe, a file or a CI log.
# A terminal is paddlecd.cli.view.mode's (for stdout here): a tty, TERM not dumb, CI not 1/true/yes.
bold() {
  local ci=${CI:-}
  case ${ci,,} in
    1 | true | yes) ;;
    *) if [ -t 1 ] && [ "${TERM:-}" != dumb ]; then
         printf '\033[1m%s\033[0m%s\n' "$1" "${2:-}"
         return
       fi ;;
  esac
  printf '%s%s\n' "$1" "${2:-}"
}
