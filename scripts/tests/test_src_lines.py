"""scripts/src_lines.py counts what the size bar counts: no `#[cfg(test)]` item, no file only a
test module brings in (nor its children), every other line.

    python3 -m unittest discover -s scripts/tests
"""
import os
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import src_lines  # noqa: E402

FILES = {
    "lib.rs": "pub mod a;\nmod b;\n#[cfg(test)]\nmod tests;\n",
    "tests.rs": "fn t() {}\nfn u() {}\n",
    "a.rs": (
        "pub fn f() -> u32 {\n    1\n}\n\n"
        "#[cfg(test)]\n#[path = \"a_fixtures.rs\"]\nmod fixtures;\n"
        "#[cfg(test)]\nmod tests {\n    #[test]\n    fn f_is_one() {\n        assert_eq!(super::f(), 1);\n    }\n}\n"
        "#[cfg(test)]\nuse std::fmt;\n"
        "pub fn g() {}\n"
    ),
    "a_fixtures.rs": "mod deeper;\nfn fixture() {}\n",
    "a_fixtures/deeper.rs": "fn d() {}\n",
    "b/mod.rs": "#[cfg(test)]\npub(crate) mod synthetic;\npub fn h() {}\n",
    "b/synthetic.rs": "fn s() {}\nfn s2() {}\n",
}


class SrcLines(unittest.TestCase):
    def test_test_items_and_test_only_files_are_not_counted(self):
        with tempfile.TemporaryDirectory() as src:
            for rel, text in FILES.items():
                os.makedirs(os.path.dirname(os.path.join(src, rel)), exist_ok=True)
                with open(os.path.join(src, rel), "w") as fh:
                    fh.write(text)
            counts = src_lines.production_lines(src)
        self.assertEqual(counts, {"lib.rs": 2, "a.rs": 5, os.path.join("b", "mod.rs"): 1})


if __name__ == "__main__":
    unittest.main()
