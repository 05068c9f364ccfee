"""The pipeline room: named stage sequences from pipelines/*.yaml, run with timing, reports, resume.

Modules: :mod:`.spec` (pipeline files and selection), :mod:`.runner` (run, resume, summary),
:mod:`.stages` (what each stage kind does), :mod:`.report` (console, JSON lines, GitHub step
summary), :mod:`.records` (the run's summary and events), :mod:`.affected` (the variants a
change touches).
"""
