#!/usr/bin/env python3
"""Regenerate sgltui's bundled catalog of SGLang server flags from SGLang's own parser.

Run it with an interpreter where `import sglang` works (tools/sglang-cpu-env.sh
builds a CPU-only one):

    /tmp/sglang-cpu-env/bin/python tools/gen_flag_catalog.py
    # -> sgltui/core/catalog_sglang_<version>.json

The extraction itself lives in sgltui/core/flag_extract.py, the same code sgltui runs against a
profile's interpreter at run time, so the bundled and the live catalogs cannot drift apart.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
EXTRACT = ROOT / "sgltui" / "core" / "flag_extract.py"


def load_extractor():
    # By path, not `import sgltui`: the SGLang interpreter need not have sgltui installed.
    spec = importlib.util.spec_from_file_location("sgltui_flag_extract", EXTRACT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "-o", "--output", help="output file (default: sgltui/core/catalog_sglang_<version>.json)"
    )
    args = ap.parse_args(argv)
    try:
        import sglang  # noqa: F401
    except ImportError:
        print(
            f"gen_flag_catalog: sglang is not importable by {sys.executable}; "
            "run this script with the interpreter that has SGLang",
            file=sys.stderr,
        )
        return 1
    catalog = load_extractor().extract()
    version = catalog["sglang_version"]
    out = (
        Path(args.output)
        if args.output
        else ROOT / "sgltui" / "core" / f"catalog_sglang_{version.replace('.', '_')}.json"
    )
    out.write_text(json.dumps(catalog, indent=1) + "\n", encoding="utf-8")
    print(f"wrote {out} ({len(catalog['flags'])} flags, SGLang {version})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
