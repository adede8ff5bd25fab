"""The tune flows: ``perfguard tune`` (``tune_flow``), the screen of one-edit neighbours
(``screen``), the search over pass orders (``order_search``), the proof of the best order
(``proof``), and ``perfguard tvm-tune``'s database (``tvm_database``)."""
