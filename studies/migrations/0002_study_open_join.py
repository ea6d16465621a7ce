from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("studies", "0001_initial"),
    ]

    operations = [
        migrations.AddField(
            model_name="study",
            name="open_join",
            field=models.BooleanField(
                default=False,
                help_text="raters with an account may join from their home page, without an invite",
            ),
        ),
    ]
