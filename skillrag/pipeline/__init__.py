"""The machinery that runs the method library as a reproducible pipeline, kept apart from it.

`stages/` holds one module per DVC stage, named as the stage; beside it the runner (`repro`),
dvc.yaml's generation (`dvc_yaml`), `recommit`, what a run records of its inputs (`settings`),
stage timings (`timing`), opening the trained components for a stage (`runtime`), Prefect
deployments (`deploy`), DVC experiment copies (`experiment`) and scheduled re-evaluation
(`reevaluation`). The library (skillrag.methods, .eval, .probe, ...) never imports from here.
"""
