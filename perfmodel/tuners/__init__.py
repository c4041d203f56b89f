"""``perfmodel.tuners``: the cost model inside compilers' tuners — rank explicit schedules, Triton hooks."""
