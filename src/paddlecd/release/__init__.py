"""The release room: promote a verified digest to semver tags, roll back, and read the ledger.

Modules: :mod:`.promote` (plan then act: the promotion and rollback entry points), :mod:`.plan`
(what a promotion writes), :mod:`.query` (releases and their history), :mod:`.ledger` (append-only
records in the release repository), :mod:`.policy` (semver rules and moving tags),
:mod:`.admission` (a Kyverno policy that admits only verified releases), :mod:`.gates` (the
upgrade gates a promotion passes), :mod:`.compare` (two releases' figures side by side),
:mod:`.prune` (old candidates deleted, never a released digest).
"""
