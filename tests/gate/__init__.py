"""The release gate: the installed ``bots`` program started as a process, the way people start it, on every
platform, with the embedded model and a hosted fake, in one process and as a fleet; and the pairwise matrix of the
settings that change a message's path (docs/explanation/release-gate.md)."""
