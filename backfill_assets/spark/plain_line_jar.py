"""Raw's plain-line reader in the JVM: a Spark function that judges a line's plain shape and takes
its eight fields in one pass (``transforms/jvm/PlainLineFields.java``), instead of a pattern and
``from_json``'s parser.

``from_json`` builds a reader and an 8 KB buffer for every line it parses, and Jackson's work on
top. A line of the plain shape (``orders.PLAIN_LINE``) needs no JSON parser: its quotes delimit
every key and string value.

Set-up (``make setup``) runs ``python -m backfill_assets.spark.plain_line_jar``, which compiles the
source with the JDK's ``javac`` against pyspark's jars into ``.jars/plain-line-fields.jar``
(again when the source, the Java or pyspark changed). ``session.spark_config`` adds the jar
to a session's ``spark.jars`` while it is there (a cluster's executors get it from the driver),
and ``validate_orders`` calls the function where the session can load it, the pattern and
``from_json`` elsewhere (no JDK at set-up, a Spark Connect client): the same verdicts, slower.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import SparkSession
    from pyspark.sql.types import StructType

SOURCE = Path(__file__).resolve().parents[1] / "transforms" / "jvm" / "PlainLineFields.java"
CLASS_NAME = "backfill_assets.jvm.PlainLineFields"
FUNCTION = "backfill_assets_plain_line_fields"


def jar_path() -> Path:
    """Where set-up puts the jar: the project's git-ignored ``.jars``."""
    return SOURCE.parents[3] / ".jars" / "plain-line-fields.jar"


def stamp(javac: str) -> str:
    """What the jar is valid for: the source, the compiler, pyspark's jars."""
    import pyspark

    version = subprocess.run([javac, "-version"], capture_output=True, text=True, check=True)
    source = hashlib.sha256(SOURCE.read_bytes()).hexdigest()
    return f"{source}\n{(version.stdout + version.stderr).strip()}\npyspark {pyspark.__version__}\n"


def _stamp_path(path: Path) -> Path:
    return path.with_name(path.name + ".stamp")


def ensure(path: Path | None = None) -> str:
    """Compile the jar unless one for this source, JDK and pyspark is there; what was done."""
    import pyspark

    path = path or jar_path()
    javac = shutil.which("javac")
    if javac is None:
        return "not built (no javac: raw's plain lines are read by from_json, slower)"
    current = stamp(javac)
    marker = _stamp_path(path)
    if path.is_file() and marker.is_file() and marker.read_text() == current:
        return f"up to date: {path}"
    classpath = str(Path(pyspark.__file__).parent / "jars" / "*")
    path.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="plain-line-", dir=path.parent) as tmp:
        classes, built = Path(tmp) / "classes", Path(tmp) / path.name
        for command in (
            [javac, "--release", "17", "-cp", classpath, "-d", str(classes), str(SOURCE)],
            [_jar_tool(javac), "--create", "--file", str(built), "-C", str(classes), "."],
        ):
            run = subprocess.run(command, capture_output=True, text=True, check=False)
            if run.returncode != 0:
                tail = "\n".join((run.stdout + run.stderr).splitlines()[-5:])
                return f"not built (raw's plain lines are read by from_json, slower): {tail}"
        os.replace(built, path)
    marker.write_text(current)
    return f"built: {path}"


def _jar_tool(javac: str) -> str:
    """The JDK's ``jar``, beside its ``javac``."""
    beside = Path(javac).resolve().parent / "jar"
    return str(beside) if beside.is_file() else "jar"


def session_jars() -> list[str]:
    """The jar for a session's ``spark.jars``: none while set-up has not built it."""
    path = jar_path()
    return [str(path)] if path.is_file() else []


def register(spark: SparkSession, fields: StructType) -> bool:
    """Register the function in ``spark`` as ``FUNCTION``, returning ``fields`` (the eight
    strings, in the Java class's order); False where the session cannot load its class (the jar
    is not on its class path) or is a Spark Connect client (whose server's class path it cannot
    ask)."""
    jvm = getattr(spark, "_jvm", None)
    if jvm is None or not jvm.org.apache.spark.util.Utils.classIsLoadable(CLASS_NAME):
        return False
    spark.udf.registerJavaFunction(FUNCTION, CLASS_NAME, fields)
    return True


def main() -> int:
    try:
        done = ensure()
    except (OSError, subprocess.SubprocessError) as exc:  # only a speed-up: set-up goes on
        done = f"not built (raw's plain lines are read by from_json, slower): {exc}"
    print(f"plain-line fields: {done}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
