"""Print the directory to give fairseq as ``--user-dir`` for this installed copy of the plugin.

    fairseq-train ... --user-dir "$(python -m transformer_plugin)"
    fairseq-train ... --user-dir "$(transformer-plugin-dir)"
"""

import os
import sys


def plugin_dir() -> str:
    return os.path.dirname(os.path.abspath(__file__))


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv and argv[0] in ("-h", "--help"):
        print(__doc__.strip())
        return 0
    print(plugin_dir())
    return 0


if __name__ == "__main__":
    sys.exit(main())
