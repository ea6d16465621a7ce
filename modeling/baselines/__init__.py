"""The non-LLM baselines of ToM-in-AMC (§5, §7.1, Appendix B), trained with torch.

Random and Majority count; ProtoNet, MTL and LEOPARD train Longformer-P
(``longformer_p``) on the item bank's tasks (``data``) with the learners in
``learners``, looped, checkpointed and evaluated by ``training``. A baseline is a
``Run`` of kind ``trained`` (``services.baseline_run_create``), executed by the run
engine on the ``gpu`` queue; its predictions are ordinary ``Prediction`` rows.
"""
