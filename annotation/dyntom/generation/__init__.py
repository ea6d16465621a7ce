"""DynToM stage generation (paper section 3.1): context, trajectory, scenarios, questions.

- :mod:`.context`: step 1's sampled social context (location, two characters) from
  the pools, with a seeded random source per stage;
- :mod:`.prompts`: the default prompt templates of steps 1-3 and the retry prompt;
- :mod:`.replies`: reading and validating the model's replies (JSON Schema + checks);
- :mod:`.story`: the stage as the release's ``story.json``, which the question
  generator (step 4, :mod:`annotation.dyntom.questions`) and the importer read.

The job itself (calls through the run engine, retries, progress) is in
:mod:`annotation.dyntom.generation.services`.
"""
