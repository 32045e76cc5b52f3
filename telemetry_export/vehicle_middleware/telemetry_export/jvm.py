"""The JVM fast path of ingest's parse: ``jvm/JournalLine.java``, compiled once
with the JDK's ``javac`` against the installed pyspark, shipped with the
session (``spark.jars``: the driver's classpath and, on a cluster, every
executor's), registered as the SQL functions :data:`FUNCTION` and :data:`HASH_CHECKS`.

It reads a line as the middleware writes it (compact ASCII JSON, each known
field of its type) in one pass over its bytes and gives the record's struct, or
null for any other line, which :func:`vehicle_middleware.telemetry_export.transforms.parse_lines`
leaves
to Spark's ``from_json``; and checks a line's hash over its bytes (Spark's
``sha2`` over a copied substring, in hex, otherwise). The results are the same;
the line is read once, where ``from_json`` allocates a character reader and
looks up the schema's defaults for every line, which makes it a large part of
ingest's work. Without a JDK (only a JRE), or in a session that did not start
with the jar, nothing is registered and ``from_json`` reads every line.
"""

from __future__ import annotations

import hashlib
import logging
import shutil
import subprocess
import tempfile
import zipfile
from pathlib import Path
from typing import Final

from pyspark.sql import SparkSession
from pyspark.sql.types import (
    ArrayType,
    BooleanType,
    DataType,
    IntegerType,
    LongType,
    StringType,
    StructType,
)
from vehicle_middleware.telemetry_export.schema import HASH_PREFIX_LEN, RECORD

__all__ = [
    "CLASS",
    "FUNCTION",
    "HASH_CHECKS",
    "PREFIX",
    "SPEC",
    "available",
    "build_jar",
    "register",
    "spec",
]

log = logging.getLogger(__name__)

FUNCTION: Final = "journal_line"
"""(line bytes, :data:`SPEC`) -> the record's struct, or null (from_json's line)."""
CLASS: Final = "vehicle_middleware.telemetry.JournalLine"
HASH_CHECKS: Final = "journal_hash_checks"
"""(line bytes, hash field, :data:`PREFIX`) -> whether the line's hash checks
(parse_lines' definition)."""
_HASH_CLASS: Final = "vehicle_middleware.telemetry.JournalLine$HashChecks"
SOURCE: Final = Path(__file__).parent / "jvm" / "JournalLine.java"
_CODE: Final[dict[type[DataType], str]] = {
    StringType: "s",
    LongType: "l",
    IntegerType: "i",
    BooleanType: "b",
}


def spec(schema: StructType) -> str:
    """``schema`` as JournalLine reads it: ``name:type,...`` (s, l, i, b, and a
    followed by the element's type for an array)."""
    fields = []
    for f in schema.fields:
        t = f.dataType
        code = "a" + _CODE[type(t.elementType)] if isinstance(t, ArrayType) else _CODE[type(t)]
        fields.append(f"{f.name}:{code}")
    return ",".join(fields)


SPEC: Final = spec(RECORD)
"""The record schema, for the function's second argument."""
PREFIX: Final = HASH_PREFIX_LEN
"""The characters before a line's body (``{"hash":"<64 hex>",``), for
:data:`HASH_CHECKS`' third argument: the contract's, not retyped in Java."""


def build_jar(cache: Path) -> Path | None:
    """The jar of :data:`SOURCE` in ``cache``, compiled if it is not there yet
    (named by the source's and pyspark's hash, so a change builds a new one);
    None without the source or ``javac`` (said once in the log)."""
    import pyspark

    javac = shutil.which("javac")
    if javac is None or not SOURCE.exists():
        log.info("ingest: no javac or no %s: lines are parsed by from_json alone", SOURCE.name)
        return None
    digest = hashlib.sha256(SOURCE.read_bytes() + pyspark.__version__.encode()).hexdigest()
    jar = cache / f"journal-line-{digest[:16]}.jar"
    if jar.exists():
        return jar
    cache.mkdir(parents=True, exist_ok=True)
    jars = Path(pyspark.__file__).parent / "jars"
    with tempfile.TemporaryDirectory(dir=cache) as tmp:
        classes = Path(tmp) / "classes"
        command = [javac, "--release", "17", "-nowarn", "-d", str(classes)]
        try:
            subprocess.run(
                [*command, "-cp", f"{jars}/*", str(SOURCE)],
                check=True,
                capture_output=True,
                timeout=120,
            )
        except (subprocess.CalledProcessError, subprocess.TimeoutExpired, OSError) as e:
            detail = getattr(e, "stderr", b"") or b""
            log.warning(
                "ingest: %s did not compile (%s): from_json alone", SOURCE.name, detail[-500:]
            )
            return None
        part = Path(tmp) / "part.jar"
        with zipfile.ZipFile(part, "w") as z:
            for f in sorted(classes.rglob("*.class")):
                z.write(f, f.relative_to(classes).as_posix())
        part.replace(jar)  # whole, or not there
    return jar


def register(spark: SparkSession) -> bool:
    """Register :data:`FUNCTION` in ``spark`` if its class is on the session's
    classpath; whether it is now registered."""
    try:
        spark.udf.registerJavaFunction(FUNCTION, CLASS, RECORD)
        spark.udf.registerJavaFunction(HASH_CHECKS, _HASH_CLASS, BooleanType())
    except Exception as e:  # the class is not there: a session started without the jar
        log.info(
            "ingest: %s is not on the classpath (%s): from_json alone", CLASS, type(e).__name__
        )
        return False
    return True


def available(spark: SparkSession) -> bool:
    """Whether :data:`FUNCTION` is registered in ``spark``."""
    return bool(spark.catalog.functionExists(HASH_CHECKS))
