"""``python -m kraft`` runs the same command line as the ``kraft`` script.

Started from a directory that holds a folder named ``kraft`` (the clone, say), Python's path
finder can take that folder for a namespace package ``kraft`` before it reaches the installed
package (an editable install is found by a meta-path finder that runs later). This file always
belongs to the real package, so in that case it re-imports ``kraft`` from its own location.
"""

import os
import sys

if getattr(sys.modules.get("kraft"), "__file__", None) is None:  # a namespace package shadows us
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    for _name in [m for m in sys.modules if m == "kraft" or m.startswith("kraft.")]:
        del sys.modules[_name]

from kraft.cli import main  # noqa: E402

raise SystemExit(main())
