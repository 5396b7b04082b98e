"""Engines as plain data: one record per engine (`records`), the built-in parameter mappings
(`presets`), what a mapping is and how it renders (`mapping`), and the engines' rules for what a
speculative config effectively runs (`effective`); and the built-in reference tables, published
figures a run's acceptance is held against (`reference_sets`).

Pure data and rules, below the engines: the spec validates against it and the plan reads it
without importing an engine; the engines' registry keys on its records.
"""
