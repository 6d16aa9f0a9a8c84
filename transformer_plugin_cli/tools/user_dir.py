"""Print the directory to give fairseq as ``--user-dir`` for this installed copy of the plugin.

    fairseq-train ... --user-dir "$(vaswani-user-dir)"
    fairseq-train ... --user-dir "$(python -m transformer_plugin_cli.tools.user_dir)"

It finds the package without importing it (and so without importing fairseq).
"""

import importlib.util
import sys

from ..console import console_script


def plugin_dir() -> str:
    spec = importlib.util.find_spec("transformer_plugin")
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError("the transformer_plugin package is not installed in this environment")
    return list(spec.submodule_search_locations)[0]


@console_script
def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv and argv[0] in ("-h", "--help"):
        print(__doc__.strip())
        return 0
    print(plugin_dir())
    return 0


if __name__ == "__main__":
    sys.exit(main())
