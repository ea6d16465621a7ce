from django.core.management.base import BaseCommand, CommandError, CommandParser

from modeling.pipelines.chartom_qa.text_similarity import (
    bertscore_model,
    predictions_text_similarity,
    text_similarity_enqueue,
)


class Command(BaseCommand):
    help = (
        "Score the generative CharToM-QA predictions of runs against their reference "
        "answers: RougeL always, BERTScore when TOMLAB_BERTSCORE_MODEL names a local model "
        "directory. Stored in each prediction's details; running it again rewrites them."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--run", dest="runs", type=int, action="append", required=True, metavar="ID"
        )
        parser.add_argument(
            "--queue", action="store_true", help="send the job to a GPU worker instead of here"
        )

    def handle(self, *args, **options) -> None:
        run_ids: list[int] = options["runs"]
        if options["queue"]:
            text_similarity_enqueue(run_ids=run_ids)
            self.stdout.write(f"queued text-similarity scoring of run(s) {run_ids} (queue gpu)")
            return
        try:
            count = predictions_text_similarity(run_ids=run_ids)
        except ValueError as exc:
            raise CommandError(str(exc)) from None
        model = bertscore_model()
        bert = f"BERTScore with {model}" if model else "BERTScore not computed (no model set)"
        self.stdout.write(f"scored {count} generative prediction(s): RougeL; {bert}")
