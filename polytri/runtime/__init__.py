"""What every compiled kernel needs at call time, whatever its target: binding and checking the call's
arguments (:mod:`.args`) and the base class of compiled kernels (:mod:`.compiled`)."""
