"""The installer that ships with each release (docs/INSTALL.md): fetch and verify a release before
touching the prefix, install it as a journalled transaction, activate it by an atomic symlink swap,
roll back, repair, and run its engine as a service that never disturbs a process it did not start.

Modules, each one concept: errors, layout (the prefix's paths), fetch (download), journal (the
transaction), venv (the release's environment), installer (install and --repair), activate,
ports (who owns a port), service (start/stop/status), upgrade (upgrade and rollback), cli, zipapp."""
