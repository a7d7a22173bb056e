"""`python -m cotforge.pipelines.cli ...` (the form `accelerate launch -m` uses) runs the `cotforge` command."""

from cotforge.pipelines.cli.main import main

main(prog_name="cotforge")
