"""The HTML report of one run: assemble (run dir -> view model), figures, render (view -> HTML)."""
