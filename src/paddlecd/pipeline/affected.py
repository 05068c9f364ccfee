"""Which variants a change touches: ``git diff`` against a base ref, mapped to image variants.

Rules, for the files changed between the merge base of ``base_ref`` and the work tree:

* ``smoke/**``, ``images/Dockerfile``, ``images/.dockerignore`` → every variant (all images run
  them);
* a variant's own ``dockerfile`` (when not the shared one) → that variant;
* ``images/base/**`` → the variants with a ``bootstrap:`` block (their base is built from it);
* ``images/variants.yaml`` → the variants whose entry differs from the base ref's (new ones
  included);
* the lock file → the variants whose locked base digest differs.

Everything else (the package, tests, docs) builds no image.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from paddlecd import files, git
from paddlecd.config import Settings
from paddlecd.errors import ConfigError

SHARED = ("smoke/", "images/Dockerfile", "images/.dockerignore")


def touched(
    changed: Iterable[str],
    *,
    variants_now: Mapping[str, Mapping[str, Any]],
    variants_before: Mapping[str, Mapping[str, Any]],
    lock_now: Mapping[str, Any] | None = None,
    lock_before: Mapping[str, Any] | None = None,
    lock_file: str = "images/lock.yaml",
) -> list[str]:
    """The variants (in ``variants_now`` order) touched by the ``changed`` paths (relative to the
    root).

    Args:
        variants_now, variants_before: the ``variants:`` mappings of images/variants.yaml now and at
            the base.
        lock_now, lock_before: the ``bases:`` mappings of the lock file now and at the base.
    """
    files = list(changed)
    hit: set[str] = set()
    for path in files:
        if any(path == s or (s.endswith("/") and path.startswith(s)) for s in SHARED):
            return list(variants_now)
        if path.startswith("images/base/"):
            hit |= {n for n, v in variants_now.items() if v.get("bootstrap")}
        hit |= {
            n
            for n, v in variants_now.items()
            if v.get("dockerfile", "Dockerfile") != "Dockerfile"
            and path == f"images/{v['dockerfile']}"
        }
    if "images/variants.yaml" in files:
        hit |= {n for n, v in variants_now.items() if variants_before.get(n) != v}
    if lock_file in files:
        before = lock_before or {}
        hit |= {n for n, e in (lock_now or {}).items() if n in variants_now and before.get(n) != e}
    return [n for n in variants_now if n in hit]


def default_base_ref(given: str | None, environ: Mapping[str, str]) -> str | None:
    """The ref a ``pr`` run diffs against: ``given`` (``--base-ref``), else under GitHub Actions
    ``origin/$GITHUB_BASE_REF`` (set on ``pull_request`` events: "The name of the base ref or
    target branch of the pull request", GitHub docs, "Variables › Default environment
    variables"), else None."""
    if given is not None:
        return given
    return f"origin/{environ['GITHUB_BASE_REF']}" if environ.get("GITHUB_BASE_REF") else None


def changed_files(settings: Settings, base_ref: str) -> list[str]:
    """Paths changed between the merge base of ``base_ref`` and the work tree (committed or not).

    Raises:
        ConfigError: ``base_ref`` is not a known ref (a shallow CI checkout needs
            ``fetch-depth: 0``).
    """
    base = merge_base(settings, base_ref)
    out = _git(
        settings, "diff", "--name-only", base, "--", what=f"diff against '{base_ref}'"
    )
    untracked = _git(settings, "ls-files", "--others", "--exclude-standard", what="untracked files")
    return sorted({*out.split(), *untracked.split()})


def merge_base(settings: Settings, base_ref: str) -> str:
    """The commit (full hex) where ``HEAD`` forked from ``base_ref``.

    ``base_ref`` is read as a revision only: one that starts with ``-`` is refused (no ref can,
    git-check-ref-format(1)), and it is resolved with ``rev-parse --verify --end-of-options``
    before ``merge-base`` sees it (a trial: ``--base-ref=--independent`` made merge-base print
    HEAD, and a PR pipeline diffed against itself checked nothing and passed; ``--upload-pack=…``
    reached git as an option).

    Raises:
        ConfigError: an option-shaped ref, or one git does not know (naming it).
    """
    if base_ref.startswith("-"):
        raise ConfigError(f"--base-ref {base_ref[:80]!r} starts with '-': no git ref can",
                          "give a branch, tag or commit, e.g. --base-ref origin/main")
    commit = _git(settings, "rev-parse", "--verify", "--quiet", "--end-of-options",
                  f"{base_ref}^{{commit}}", what=f"base ref '{base_ref[:80]}'").strip()
    return _git(settings, "merge-base", commit, "HEAD", what=f"base ref '{base_ref[:80]}'").strip()


def _at_ref(settings: Settings, base_ref: str, rel: str, key: str) -> dict[str, Any]:
    """The ``key`` mapping of YAML file ``rel`` as it was at the merge base of ``base_ref`` ({} if
    absent)."""
    base = merge_base(settings, base_ref)
    text = git.show(settings.root, base, rel)
    return (files.load_yaml(text) or {}).get(key) or {} if text is not None else {}


def select(settings: Settings, base_ref: str) -> list[str]:
    """The variants touched by the change from ``base_ref`` to the work tree (see module rules)."""
    rel_variants, rel_lock = settings.variants_file, settings.lock_file
    now_v = files.load_yaml(settings.path(rel_variants).read_text()).get("variants") or {}
    lock_path = settings.path(rel_lock)
    now_l = (
        (files.load_yaml(lock_path.read_text()) or {}).get("bases") or {}
        if lock_path.exists()
        else {}
    )
    return touched(
        changed_files(settings, base_ref),
        variants_now=now_v,
        variants_before=_at_ref(settings, base_ref, rel_variants, "variants"),
        lock_now=now_l,
        lock_before=_at_ref(settings, base_ref, rel_lock, "bases"),
        lock_file=rel_lock,
    )


def _git(settings: Settings, *args: str, what: str) -> str:
    return git.output(settings.root, *args, what=f"git: reading {what}", error=ConfigError,
                      hint="fetch it first (git fetch origin main; "
                           "actions/checkout needs fetch-depth: 0)")
