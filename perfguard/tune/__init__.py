"""``perfguard tune``'s search space (:mod:`.space`) and document (:mod:`.document`); the search
and its proof are a flow (:mod:`perfguard.flows.tuning.tune_flow`)."""
