"""One module per `sweeper` verb; each exposes a typer command function registered in cli.py."""
