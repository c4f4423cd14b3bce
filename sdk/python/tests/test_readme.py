"""The Python examples of the READMEs run as written and print what their comments say."""

import os
import re
import subprocess
import sys
import tempfile
import unittest
from pathlib import Path

from .daemon import REPO, shared

SDK = REPO / "sdk" / "python"


def python_blocks(readme: Path) -> list:
    return re.findall(r"```python\n(.*?)```", readme.read_text(), re.S)


class ReadmeTest(unittest.TestCase):
    def run_example(self, code: str) -> str:
        d = shared()
        with tempfile.TemporaryDirectory() as tmp:
            script = os.path.join(tmp, "example.py")
            with open(script, "w") as f:
                f.write(code)
            env = dict(os.environ, CONCH_URL=d.url, CONCH_TOKEN=d.token, PYTHONPATH=str(SDK))
            # -X dev shows what an example leaves open (an unclosed socket's ResourceWarning).
            p = subprocess.run([sys.executable, "-X", "dev", "-W", "error::ResourceWarning", script], cwd=tmp,
                               env=env, capture_output=True, text=True, timeout=120)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertNotIn("ResourceWarning", p.stderr, "the example leaves a connection open")
        return p.stdout

    def test_the_sdk_readme_examples(self) -> None:
        use, aio = python_blocks(SDK / "README.md")[:2]
        self.assertEqual(self.run_example(use), "mode test /tmp/demo\nhi ada\n12.566370614359172\n1\n2\n3\n")
        self.assertEqual(self.run_example(aio), "done\n")

    def test_the_repository_readme_example(self) -> None:
        # The first Python example of the repository's README, "A session from Python".
        self.assertEqual(self.run_example(python_blocks(REPO / "README.md")[0]), "3 'mode test\\n'\n")


if __name__ == "__main__":
    unittest.main()
