"""The training machines' speed, for TIME: a probe of this machine (:mod:`.probing`), its figures kept
(:mod:`.probe_cache`), whether the cores are busy (:mod:`.busy_cores`), what the machine is (:mod:`.machine`), a
budget's updates at a figure (:mod:`.time_budget`), another machine's speed file (:mod:`.speed_file`), and
``vaswani-speed-probe`` (:mod:`.cli`). The arithmetic apart from the timing: recipes/planner/probe_arithmetic.py."""
