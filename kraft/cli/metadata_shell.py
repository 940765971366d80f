"""``kraft metadata-shell``: browse a metadata snapshot + log offline, like Kafka's
kafka-metadata-shell. ``--directory DIR`` loads the latest snapshot of the metadata log
directory (or a node's log dir holding ``__cluster_metadata-0``) and the log after it;
``--snapshot FILE`` loads one snapshot file. Commands (paths may use ``*``/``?`` globs)::

    ls [PATH...]   cd [PATH]   pwd   cat PATH...   tree [PATH...]   find [PATH...]   help   exit

Words after the options run one command and exit (``kraft metadata-shell --directory DIR ls
/topics``); without them the shell reads commands, one per line, from the terminal or stdin.
Read-only: it never writes to the directory. The tree's layout is ``metadata_tree.py``'s.
"""

from __future__ import annotations

import fnmatch
import shlex
import sys

from kraft.cli.metadata_dir import load_directory, load_snapshot_file
from kraft.cli.metadata_tree import Dir, as_path, build_tree, lookup, normalize

HELP = """Commands:
  ls [PATH...]     list a directory (or name a file)
  cd [PATH]        change the working directory (default /)
  pwd              print the working directory
  cat PATH...      print files
  tree [PATH...]   print a directory and everything under it
  find [PATH...]   print every path under a directory
  help             this text
  exit             leave the shell
Top-level directories: /brokers /controllers /topics /topicIds /configs /acls /features
/clientQuotas /producerIds /local"""


def register(subparsers) -> None:
    p = subparsers.add_parser("metadata-shell", help="browse a metadata snapshot and log offline",
                              description="Browse a metadata snapshot and the log after it offline, like "
                              "Kafka's kafka-metadata-shell. Commands: ls, cd, pwd, cat, tree, find, help, exit "
                              "(paths may use * and ? globs; `help` in the shell explains them).")
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--directory", "-d", metavar="DIR",
                     help="metadata log directory (__cluster_metadata-0) or a node's log dir holding it")
    src.add_argument("--snapshot", "-s", metavar="FILE", help="one <offset>-<epoch>.checkpoint file")
    p.add_argument("words", nargs="*", metavar="COMMAND",
                   help="a command to run once, e.g. `ls /topics` (default: interactive)")
    p.set_defaults(func=run)


class Shell:
    """One shell session over a tree; ``out``/``err`` are file-like."""

    def __init__(self, root: Dir, out=None, err=None):
        self.root = root
        self.cwd: list[str] = []
        self.out = out or sys.stdout
        self.err = err or sys.stderr
        self.errors = 0
        self.done = False

    # --- helpers ---

    def _fail(self, msg: str) -> None:
        self.err.write(msg + "\n")
        self.errors += 1

    def _expand(self, cmd: str, path: str) -> list[list[str]]:
        """The absolute paths ``path`` names (globs expanded, sorted); an error if none."""
        parts = normalize(as_path(self.cwd), path)
        found = [[]]
        for part in parts:
            nxt = []
            for prefix in found:
                node = lookup(self.root, prefix)
                if not isinstance(node, Dir):
                    continue
                if any(c in part for c in "*?["):
                    nxt += [prefix + [name] for name in fnmatch.filter(list(node.entries), part)]
                elif part in node.entries:
                    nxt.append(prefix + [part])
            found = nxt
        if not found:
            self._fail(f"{cmd}: {path}: no such file or directory")
        return found

    # --- commands ---

    def run_line(self, line: str) -> None:
        try:
            words = shlex.split(line)
        except ValueError as exc:
            self._fail(f"parse error: {exc}")
            return
        if words:
            self.run(words)

    def run(self, words: list[str]) -> None:
        cmd, args = words[0], words[1:]
        handler = getattr(self, f"cmd_{cmd}", None)
        if handler is None:
            self._fail(f"unknown command: {cmd} (try help)")
            return
        handler(args)

    def cmd_help(self, args) -> None:
        self.out.write(HELP + "\n")

    def cmd_exit(self, args) -> None:
        self.done = True

    def cmd_pwd(self, args) -> None:
        self.out.write(as_path(self.cwd) + "\n")

    def cmd_cd(self, args) -> None:
        if len(args) > 1:
            self._fail("cd: too many arguments")
            return
        if not args:
            self.cwd = []
            return
        paths = self._expand("cd", args[0])
        if len(paths) > 1:
            self._fail(f"cd: {args[0]}: names more than one directory")
        elif paths:
            if isinstance(lookup(self.root, paths[0]), Dir):
                self.cwd = paths[0]
            else:
                self._fail(f"cd: {args[0]}: not a directory")

    def cmd_ls(self, args) -> None:
        targets = [p for a in (args or ["."]) for p in self._expand("ls", a)]
        files = [p for p in targets if not isinstance(lookup(self.root, p), Dir)]
        dirs = [p for p in targets if isinstance(lookup(self.root, p), Dir)]
        for p in files:
            self.out.write(p[-1] + "\n")
        for i, p in enumerate(dirs):
            if len(targets) > 1:
                self.out.write(("\n" if i or files else "") + as_path(p) + ":\n")
            for name in lookup(self.root, p).entries:
                self.out.write(name + "\n")

    def cmd_cat(self, args) -> None:
        if not args:
            self._fail("cat: give the files to print")
        for a in args:
            for p in self._expand("cat", a):
                node = lookup(self.root, p)
                if isinstance(node, Dir):
                    self._fail(f"cat: {as_path(p)}: is a directory")
                else:
                    self.out.write(node.text + "\n")

    def cmd_tree(self, args) -> None:
        for a in args or ["."]:
            for p in self._expand("tree", a):
                self._tree(p[-1] if p else "/", lookup(self.root, p), 0)

    def _tree(self, name: str, node, depth: int) -> None:
        pad = "  " * depth
        if isinstance(node, Dir):
            self.out.write(f"{pad}{name}:\n")
            for child, sub in node.entries.items():
                self._tree(child, sub, depth + 1)
        else:
            self.out.write(f"{pad}{name}: {node.text}\n")

    def cmd_find(self, args) -> None:
        for a in args or ["."]:
            for p in self._expand("find", a):
                self._find(p, lookup(self.root, p))

    def _find(self, parts: list[str], node) -> None:
        self.out.write(as_path(parts) + "\n")
        if isinstance(node, Dir):
            for child, sub in node.entries.items():
                self._find(parts + [child], sub)


def _interactive(shell: Shell) -> None:
    tty = sys.stdin.isatty()
    if tty:
        try:
            import readline  # noqa: F401  (line editing and history for input())
        except ImportError:
            pass
        print("[ kraft metadata shell ] type help for commands")
    while not shell.done:
        try:
            line = input(">> ") if tty else sys.stdin.readline()
        except EOFError:
            break
        if not tty and not line:
            break
        shell.run_line(line)


def run(args) -> int:
    loaded = load_snapshot_file(args.snapshot) if args.snapshot else load_directory(args.directory)
    if loaded.log_error:
        print(f"warning: log read up to invalid data: {loaded.log_error}", file=sys.stderr)
    batches, recs = loaded.skipped
    if recs:
        print(f"note: skipped {recs} record(s) in {batches} batch(es) that are not metadata records "
              "(values written into __cluster_metadata with `kraft produce`)", file=sys.stderr)
    root = build_tree(loaded.loaded.image, snapshot_id=loaded.snapshot_id, next_offset=loaded.loaded.next_offset,
                      records=loaded.loaded.records)
    shell = Shell(root)
    if args.words:
        shell.run(list(args.words))
    else:
        _interactive(shell)
    return 1 if shell.errors else 0
