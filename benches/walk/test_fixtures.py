"""Tests of benches/walk/fixtures.py: each builder gives the same bytes (and the same commit hashes)
twice, the check sets are well formed, and a few of their answers agree with an independent count.

    python3 -m pytest benches/walk/test_fixtures.py    or    python3 benches/walk/test_fixtures.py
"""
import datetime
import hashlib
import json
import os
import pathlib
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fixtures as fx


def tree_digest(root):
    """A hash of every path, its content (files) and its mtime, below root."""
    h = hashlib.sha256()
    for d, dirs, files in os.walk(root):
        dirs.sort()
        for name in sorted(dirs) + sorted(files):
            p = os.path.join(d, name)
            st = os.stat(p)
            h.update(os.path.relpath(p, root).encode() + b"\0" + str(int(st.st_mtime)).encode() + b"\0")
            if os.path.isfile(p):
                with open(p, "rb") as fh:
                    h.update(fh.read())
    return h.hexdigest()


def refs(repo):
    return fx.git(repo, "for-each-ref", "--format=%(refname) %(objectname)")


class Shared:
    """One build of each fixture and its check set for the whole module."""
    tmp = None

    @classmethod
    def get(cls):
        if cls.tmp is None:
            cls.tmp = tempfile.TemporaryDirectory()
            t = cls.tmp.name
            cls.fs, cls.repo, cls.mem = os.path.join(t, "ws"), os.path.join(t, "repo"), os.path.join(t, "mem.jsonl")
            fx.build_fs(cls.fs)
            fx.build_git(cls.repo)
            fx.build_memory(cls.mem)
            cls.sets = {}
            for kind, root in [("fs", cls.fs), ("git", cls.repo)]:
                out = os.path.join(t, f"{kind}.jsonl")
                fx.write_check_set(kind, root, out)
                with open(out) as fh:
                    cls.sets[kind] = [json.loads(line) for line in fh]
        return cls


def by_id(records):
    return {r["id"]: r for r in records}


def find(records, words):
    """The one record whose task contains `words`."""
    found = [r for r in records if words in r["task"]]
    assert len(found) == 1, (words, [r["id"] for r in found])
    return found[0]


class Determinism(unittest.TestCase):
    def test_fs_same_seed_same_tree(self):
        with tempfile.TemporaryDirectory() as a, tempfile.TemporaryDirectory() as b:
            fx.build_fs(os.path.join(a, "x"))
            fx.build_fs(os.path.join(b, "elsewhere"))
            self.assertEqual(tree_digest(os.path.join(a, "x")), tree_digest(os.path.join(b, "elsewhere")))
            fx.build_fs(os.path.join(a, "s1"), seed=1)
            self.assertNotEqual(tree_digest(os.path.join(a, "x")), tree_digest(os.path.join(a, "s1")))

    def test_git_same_hashes(self):
        with tempfile.TemporaryDirectory() as a, tempfile.TemporaryDirectory() as b:
            ra, rb = os.path.join(a, "r"), os.path.join(b, "other", "repo")
            fx.build_git(ra)
            fx.build_git(rb)
            self.assertEqual(refs(ra), refs(rb))
            self.assertEqual(fx.git(ra, "rev-parse", "HEAD"), fx.git(rb, "rev-parse", "HEAD"))
            names = [line.split()[0] for line in fx.lines(refs(ra))]
            for want in ["refs/heads/main", "refs/heads/feature/search", "refs/heads/fix/pager",
                         "refs/heads/docs/install", "refs/tags/v0.1.0", "refs/tags/v0.2.0"]:
                self.assertIn(want, names)

    def test_memory_same_bytes(self):
        with tempfile.TemporaryDirectory() as a:
            fx.build_memory(os.path.join(a, "1.jsonl"))
            fx.build_memory(os.path.join(a, "2.jsonl"))
            with open(os.path.join(a, "1.jsonl"), "rb") as f1, open(os.path.join(a, "2.jsonl"), "rb") as f2:
                self.assertEqual(f1.read(), f2.read())


class Fixtures(unittest.TestCase):
    def test_fs_shape(self):
        s = Shared.get()
        files = [p for p in pathlib.Path(s.fs).rglob("*") if p.is_file()]
        self.assertTrue(60 <= len(files) <= 90, len(files))
        sizes = [p.stat().st_size for p in files]
        self.assertLess(min(sizes), 100)
        self.assertTrue(4000 < max(sizes) <= 8192, max(sizes))
        self.assertTrue(any(" " in p.name for p in files))
        depth = max(len(p.relative_to(s.fs).parts) - 1 for p in files)
        self.assertEqual(depth, 3)
        for p in pathlib.Path(s.fs).rglob("*"):
            year = datetime.datetime.fromtimestamp(p.stat().st_mtime, fx.UTC).year
            self.assertEqual(year, 2024, p)

    def test_git_shape(self):
        s = Shared.get()
        total = int(fx.git(s.repo, "rev-list", "--count", "--all"))
        self.assertTrue(35 <= total <= 45, total)
        authors = set(fx.lines(fx.git(s.repo, "log", "--all", "--format=%an <%ae>")))
        self.assertEqual(len(authors), 4)
        self.assertEqual(fx.lines(fx.git(s.repo, "status", "--porcelain")), [])
        kinds = set(fx.git(s.repo, "log", "--all", "-M", "--name-status", "--format=").split())
        self.assertTrue({"A", "M", "D"} <= kinds, kinds)
        self.assertTrue(any(k.startswith("R") for k in kinds))

    def test_memory_graph(self):
        s = Shared.get()
        with open(s.mem) as fh:
            items = [json.loads(line) for line in fh if line.strip()]
        ents = [i for i in items if i["type"] == "entity"]
        rels = [i for i in items if i["type"] == "relation"]
        self.assertEqual(len(ents) + len(rels), len(items))
        names = {e["name"] for e in ents}
        self.assertEqual(len(names), len(ents))
        self.assertTrue(20 <= len(ents) <= 30 and 25 <= len(rels) <= 40, (len(ents), len(rels)))
        for e in ents:
            self.assertEqual(set(e), {"type", "name", "entityType", "observations"})
            self.assertTrue(2 <= len(e["observations"]) <= 4, e["name"])
        for r in rels:
            self.assertEqual(set(r), {"type", "from", "to", "relationType"})
            self.assertIn(r["from"], names)
            self.assertIn(r["to"], names)


class CheckSets(unittest.TestCase):
    def test_well_formed(self):
        s = Shared.get()
        for kind, root in [("fs", s.fs), ("git", s.repo)]:
            recs = s.sets[kind]
            self.assertGreaterEqual(len(recs), 32, kind)
            self.assertEqual(len({r["id"] for r in recs}), len(recs))
            self.assertEqual(len({r["task"] for r in recs}), len(recs))
            self.assertEqual({r["tags"][2] for r in recs}, set(fx.KINDS), kind)
            for r in recs:
                self.assertEqual(set(r), {"id", "task", "expected", "split", "tags", "source"})
                self.assertEqual((r["split"], r["source"], r["tags"][:2]), ("validation", "check-set", ["check-set", kind]))
                e = r["expected"]
                if isinstance(e, dict):
                    (key, val), = e.items()
                    self.assertIn(key, {"exact", "contains", "set"})
                    vals = val if key == "set" else [val]
                    self.assertTrue(vals and all(isinstance(v, str) and v.strip() for v in vals), r)
                    if key == "exact":
                        self.assertIn(val, {"yes", "no"})
                    for v in vals:
                        self.assertFalse(v.startswith("/") or root in v or "/tmp" in v, r)
                else:
                    self.assertIsInstance(e, (int, float), r)
                    self.assertNotIsInstance(e, bool, r)
                if kind == "git":
                    self.assertIn(root, r["task"])
                    self.assertNotIn("{repo}", r["task"])
                else:
                    self.assertNotIn(root, r["task"])

    def test_both_yes_and_no(self):
        s = Shared.get()
        for kind in ["fs", "git"]:
            answers = {r["expected"]["exact"] for r in s.sets[kind] if "existence" in r["tags"]}
            self.assertEqual(answers, {"yes", "no"}, kind)

    def test_fs_answers_by_independent_means(self):
        s = Shared.get()
        recs, root = s.sets["fs"], pathlib.Path(s.fs)
        self.assertEqual(find(recs, "Markdown files")["expected"], len(list(root.rglob("*.md"))))
        self.assertEqual(find(recs, "completely empty")["expected"],
                         sum(1 for p in root.rglob("*") if p.is_dir() and not any(p.iterdir())))
        biggest = max((p for p in root.rglob("*") if p.is_file()), key=lambda p: p.stat().st_size)
        self.assertIn(find(recs, "biggest file in my whole")["expected"]["contains"], str(biggest))
        self.assertEqual(find(recs, "pancakes")["expected"], len((root / "recipes/pancakes.md").read_bytes()))
        lines = (root / "projects/weather-station/data/readings-april.csv").read_text().splitlines()
        self.assertEqual(find(recs, "April CSV")["expected"], len(lines) - 1)
        self.assertEqual(find(recs, "Python scripts")["expected"], len(list((root / "projects").rglob("*.py"))))

    def test_git_answers_by_independent_means(self):
        s = Shared.get()
        recs, repo = s.sets["git"], s.repo
        self.assertEqual(find(recs, "How many commits are there on the main")["expected"],
                         len(fx.lines(fx.git(repo, "log", "--format=%H", "main"))))
        self.assertEqual(find(recs, "Dana Kowalski made")["expected"],
                         int(fx.git(repo, "rev-list", "--count", "--author=Dana Kowalski", "main")))
        self.assertEqual(find(recs, "aren't on main yet")["expected"],
                         int(fx.git(repo, "rev-list", "--count", "fix/pager", "^main")))
        self.assertEqual(find(recs, "How many branches")["expected"], len(fx.lines(fx.git(repo, "branch"))))
        short = fx.git(repo, "shortlog", "-sn", "main").splitlines()[0].split("\t")[1]
        self.assertEqual(find(recs, "most commits on the main")["expected"]["contains"], short)
        tagged = fx.git(repo, "log", "-1", "--format=%H", "v0.2.0").strip()
        self.assertEqual(find(recs, "full hash")["expected"]["contains"], tagged)

    def test_git_check_set_on_another_path(self):
        """The answers depend on the repository, not on where it lies: only the tasks' paths change."""
        s = Shared.get()
        with tempfile.TemporaryDirectory() as t:
            other = os.path.join(t, "copy")
            fx.build_git(other)
            again = fx.check_set("git", other)
            self.assertEqual([r["expected"] for r in again], [r["expected"] for r in s.sets["git"]])
            self.assertTrue(all(other in r["task"] for r in again))


if __name__ == "__main__":
    unittest.main()
