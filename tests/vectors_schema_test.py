#!/usr/bin/python3
"""vectors_schema_test.py VECTORS_DIR: every vector file against its schema.

The ctest corpus/vectors-schema (label corpus): VECTORS_DIR/schema.json is a
valid JSON Schema (draft 2020-12) and every other VECTORS_DIR/*.json
validates against it. Controls show the check can fail: copies of a vector
file with a test's sha256 removed, a bugType outside the enum, an invalid
test given an expectedOutput, and a valid test without one, must each be
rejected; so must a model_dir test whose entry has no kind, whose regular
entry has no sha256, or which carries a sha256 of its own.

Needs Debian's python3-jsonschema (scripts/setup.sh installs it). Without it
the test is skipped (exit 77), except under CI=true, where it fails.
"""
import copy
import glob
import json
import os
import sys

SKIP = 77


def main():
    if len(sys.argv) != 2:
        print("usage: vectors_schema_test.py VECTORS_DIR", file=sys.stderr)
        return 2
    try:
        import jsonschema
    except ImportError:
        ci = os.environ.get("CI", "").lower() in ("true", "1", "yes", "on")
        print("python3-jsonschema is not installed (apt-get install python3-jsonschema)",
              file=sys.stderr)
        return 1 if ci else SKIP
    folder = sys.argv[1]
    with open(os.path.join(folder, "schema.json"), encoding="utf-8") as f:
        schema = json.load(f)
    jsonschema.Draft202012Validator.check_schema(schema)
    validator = jsonschema.Draft202012Validator(schema)

    failures = 0
    files = sorted(p for p in glob.glob(os.path.join(folder, "*.json"))
                   if os.path.basename(p) != "schema.json")
    if not files:
        print(f"no vector files in {folder}", file=sys.stderr)
        return 1
    docs = {}
    for path in files:
        with open(path, encoding="utf-8") as f:
            docs[path] = json.load(f)
        errors = sorted(validator.iter_errors(docs[path]), key=lambda e: list(e.absolute_path))
        for e in errors[:5]:
            print(f"{path}: {'/'.join(map(str, e.absolute_path))}: {e.message[:300]}")
        failures += len(errors)
    print(f"{len(files)} vector files checked against schema.json, {failures} errors")

    # Controls: each broken copy must be rejected.
    def tests_of(doc):
        return [t for g in doc["testGroups"] for t in g["tests"]]

    # The first file of single-file tests (model_dir's tests are folders).
    sample = next(d for d in docs.values() if "sha256" in tests_of(d)[0])
    directories = docs[os.path.join(folder, "model_dir.json")]
    valid = next(d for d in docs.values()
                 if any("expectedOutput" in t for t in tests_of(d)))
    invalid = next(d for d in docs.values()
                   if any(t["result"] == "invalid" for t in tests_of(d)))
    controls = []
    doc = copy.deepcopy(sample)
    del tests_of(doc)[0]["sha256"]
    controls.append(("a test without sha256", doc))
    doc = copy.deepcopy(sample)
    next(iter(doc["notes"].values()))["bugType"] = "SOMETHING"
    controls.append(("a note with an unknown bugType", doc))
    doc = copy.deepcopy(invalid)
    test = next(t for t in tests_of(doc) if t["result"] == "invalid")
    test["expectedOutput"] = {"file": "x/1.expected.safetensors", "size": 8, "sha256": "0" * 64}
    controls.append(("an invalid test with an expectedOutput", doc))
    doc = copy.deepcopy(valid)
    del next(t for t in tests_of(doc) if "expectedOutput" in t)["expectedOutput"]
    controls.append(("a valid test without expectedOutput or decodeRefusal", doc))
    doc = copy.deepcopy(directories)
    del tests_of(doc)[0]["entries"][0]["kind"]
    controls.append(("a directory entry without its kind", doc))
    doc = copy.deepcopy(directories)
    entry = next(e for t in tests_of(doc) for e in t["entries"] if e["kind"] == "regular")
    del entry["sha256"]
    controls.append(("a regular directory entry without sha256", doc))
    doc = copy.deepcopy(directories)
    tests_of(doc)[0]["sha256"] = "0" * 64
    controls.append(("a directory test with a sha256 of its own", doc))
    for what, doc in controls:
        if validator.is_valid(doc):
            print(f"control not rejected: {what}")
            failures += 1
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
