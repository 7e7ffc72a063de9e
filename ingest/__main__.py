"""``python -m ingest`` is no command line: papers are added with ``python -m copilot papers ...``."""

import sys


def main() -> None:
    print("use: python -m copilot papers ...", file=sys.stderr)
    sys.exit(2)


if __name__ == "__main__":
    main()
