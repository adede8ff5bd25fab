"""The night: its flow (``night``), the re-check of a suspected change (``recheck``), exact
bisections (``exact_bisections``) with a known culprit tested first (``known_culprit``), pipeline
edits as code changes (``pipeline_edits``), one night per commit (``one_per_commit``) and a
sharded night's follow-up (``shard_followup``)."""
