# The build folder holds copies of the notebooks (myst-nb's jupyter_execute/): not tests.
collect_ignore = ["_build"]
