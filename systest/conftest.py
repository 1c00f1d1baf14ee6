"""The system tests (pytest + labgrid): each folder is one environment
(hil/: the hardware-in-the-loop VM). labgrid's pytest plugin gives the
`strategy` fixture from the environment file passed with --lg-env; this
folder on sys.path makes `lab` (the shared helpers) importable."""
