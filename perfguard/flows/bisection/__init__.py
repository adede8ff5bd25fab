"""The bisect flows: which commit (``commit_search``), which pass (``pass_search``), which
version (``version_search``), by an exact metric (``exact_probes``), which commit fixed it
(``fix_search``), and the found culprit explained (``culprit_explain``)."""
