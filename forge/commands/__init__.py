"""One module per `forge` command, each with `add_parser(subparsers)` and `run(ns)`."""
