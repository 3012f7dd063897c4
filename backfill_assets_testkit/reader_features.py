"""A table given a reader feature as another Delta writer would: a commit upgrading its protocol
(and, for column mapping, its schema's field metadata), written into the log by hand, so that no
engine of the project is asked to make it."""

from __future__ import annotations

import json
from pathlib import Path


def declare_reader_feature(table_dir: Path, feature: str) -> int:
    """Commit ``feature`` (``deletionVectors`` or ``columnMapping``) to the table at
    ``table_dir`` as its next version; that version."""
    log = table_dir / "_delta_log"
    commits = sorted(log.glob("*.json"))
    metadata = next(
        json.loads(line)["metaData"]
        for path in reversed(commits)
        for line in path.read_text().splitlines()
        if '"metaData"' in line
    )
    if feature == "columnMapping":
        schema = json.loads(metadata["schemaString"])
        for number, field in enumerate(schema["fields"], start=1):
            # Physical names equal to logical ones, as in a table upgraded to column mapping.
            field["metadata"] = {
                "delta.columnMapping.id": number,
                "delta.columnMapping.physicalName": field["name"],
            }
        metadata["schemaString"] = json.dumps(schema)
        metadata["configuration"] = {
            **(metadata.get("configuration") or {}),
            "delta.columnMapping.mode": "name",
            "delta.columnMapping.maxColumnId": str(len(schema["fields"])),
        }
    protocol = {
        "minReaderVersion": 3,
        "minWriterVersion": 7,
        "readerFeatures": [feature],
        "writerFeatures": [feature],
    }
    version = int(commits[-1].name.split(".")[0]) + 1
    commit = [
        {"commitInfo": {"operation": "SET TBLPROPERTIES", "timestamp": 1}},
        {"protocol": protocol},
        {"metaData": metadata},
    ]
    (log / f"{version:020d}.json").write_text("\n".join(json.dumps(a) for a in commit) + "\n")
    return version
