"""scripts/import_floors.py finds what the floor map forbids: an import up a floor, and a circle
of files that spans folders, in production code only.

    python3 -m unittest discover -s scripts/tests
"""
import os
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import import_floors  # noqa: E402

# A tree that holds the floors: cli over runs over gpu, each onto the ground floor (results).
CLEAN = {
    "lib.rs": "pub mod cli;\npub mod runs;\npub mod gpu;\npub mod results;\n",
    "cli/mod.rs": "mod sweep;\nuse crate::runs::sweep::run;\n",
    "cli/sweep.rs": "use super::super::runs::sweep;\n// use crate::cli::mod_that_is_a_comment;\n",
    "runs/mod.rs": "pub mod sweep;\npub mod steps;\n",
    # Two files of one folder may import each other.
    "runs/sweep.rs": "use super::steps::cell;\nuse crate::gpu::Gpu;\npub fn run() { crate::out!(\"x\"); }\n",
    "runs/steps.rs": "use super::sweep::run;\nuse crate::results::Row;\npub fn cell() {}\n",
    "gpu/mod.rs": "pub struct Gpu;\nuse crate::results::Row;\n",
    "results/mod.rs": "pub mod csv;\npub struct Row;\n",
    "results/csv.rs": "use super::Row;\n",
}


def breaches(files):
    with tempfile.TemporaryDirectory() as src:
        for rel, text in files.items():
            path = os.path.join(src, rel)
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path, "w") as f:
                f.write(text)
        return import_floors.breaches(src)


class ImportFloors(unittest.TestCase):
    def test_a_tree_that_keeps_its_floors_holds(self):
        self.assertEqual(breaches(CLEAN), [])

    def test_an_import_up_a_floor_is_named(self):
        files = dict(CLEAN)
        files["gpu/mod.rs"] += "use crate::runs::sweep::run;\n"
        found = breaches(files)
        self.assertIn("gpu/mod.rs imports runs/sweep.rs: an arrow up (floor 5 to 3)", found)

    def test_a_relative_import_up_is_resolved_too(self):
        files = dict(CLEAN)
        files["results/csv.rs"] += "use super::super::cli::run;\n"
        self.assertTrue(any(b.startswith("results/csv.rs imports cli/mod.rs") for b in breaches(files)))

    def test_a_circle_across_folders_is_named_even_through_a_file_of_one_folder(self):
        files = dict(CLEAN)
        files["results/mod.rs"] += "pub mod deep;\n"
        files["results/deep/mod.rs"] = "use crate::results::csv::x;\n"
        files["results/csv.rs"] += "use super::deep::y;\n"
        found = breaches(files)
        self.assertIn("a circle between folders: results/csv.rs ↔ results/deep/mod.rs", found)

    def test_a_grouped_import_up_is_named(self):
        files = dict(CLEAN)
        files["gpu/mod.rs"] += "use crate::{\n    results::Row,\n    runs::{steps::cell, sweep},\n};\n"
        found = breaches(files)
        self.assertIn("gpu/mod.rs imports runs/steps.rs: an arrow up (floor 5 to 3)", found)
        self.assertIn("gpu/mod.rs imports runs/sweep.rs: an arrow up (floor 5 to 3)", found)

    def test_a_circle_through_a_child_module_named_bare_is_named(self):
        files = dict(CLEAN)
        # A mod.rs re-exports its child by the child's bare name; the child calls back up.
        files["results/mod.rs"] += "pub mod deep;\npub use deep::{y, z as w};\n"
        files["results/deep/mod.rs"] = "pub fn y() { crate::results::csv_of(); }\n"
        found = breaches(files)
        self.assertIn("a circle between folders: results/deep/mod.rs ↔ results/mod.rs", found)

    def test_a_self_path_resolves_and_a_string_or_comment_is_no_path(self):
        index = {(): "lib.rs", ("gpu",): "gpu/mod.rs", ("gpu", "inner"): "gpu/inner.rs",
                 ("cli",): "cli/mod.rs"}
        text = ('fn f() { self::inner::g(); }\n'
                'const S: &str = "crate::cli::run";\n'
                'fn h() {} // super::cli::run\n')
        self.assertEqual(import_floors.imports("gpu/mod.rs", text, index), {"gpu/inner.rs"})

    def test_test_code_is_left_out(self):
        files = dict(CLEAN)
        files["gpu/mod.rs"] += "#[cfg(test)]\nmod tests {\n    use crate::cli::run;\n}\n"
        self.assertEqual(breaches(files), [])

    def test_a_folder_on_no_floor_is_named(self):
        files = dict(CLEAN)
        files["lib.rs"] += "pub mod extra;\n"
        files["extra.rs"] = "pub fn e() {}\n"
        self.assertTrue(any("extra.rs: its folder is on no floor" in b for b in breaches(files)))


if __name__ == "__main__":
    unittest.main()
