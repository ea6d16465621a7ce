# Scene rows become generic study items and assignments; every existing row is kept.
from django.db import migrations


class Migration(migrations.Migration):
    dependencies = [
        ("benchmarks", "0001_initial"),
        ("studies", "0002_study_open_join"),
    ]

    operations = [
        # Constraints and indexes naming the old fields go first: SQLite rebuilds the
        # table on a rename and would otherwise look for the old column.
        migrations.RemoveConstraint("sceneassignment", "scene_assignment_once"),
        migrations.RemoveConstraint("studyscene", "study_scene_unique"),
        migrations.RemoveIndex("sceneassignment", "studies_sce_study_s_38875d_idx"),
        migrations.RenameModel("SceneAssignment", "Assignment"),
        migrations.RenameModel("StudyScene", "StudyItem"),
        migrations.RenameField("assignment", "study_scene", "study_item"),
        migrations.RenameField("historyview", "scene_assignment", "assignment"),
    ]
