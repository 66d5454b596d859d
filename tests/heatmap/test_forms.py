"""heatmap/forms.py: the heatmap and health query, its defaults and the messages the
API has always answered; no HTTP, no database."""

from datetime import UTC, datetime, timedelta

import pytest
from django.utils import timezone

from heatmap.forms import OUT_OF_RANGE, HeatmapForm, WindowForm

ISO = (
    "Datetime has wrong format. Use one of these formats instead: "
    "YYYY-MM-DDThh:mm[:ss[.uuuuuu]][+HH:MM|-HH:MM|Z]."
)


def errors(form_class, data):
    form = form_class(data)
    assert not form.is_valid()
    return {field: list(messages) for field, messages in form.errors.items()}


def test_nothing_given_is_the_last_seven_days_of_claims_two_levels_deep():
    form = HeatmapForm({})
    assert form.is_valid(), form.errors
    query = form.cleaned_data
    assert (query["mode"], query["depth"], query["project"], query["prefix"]) == (
        "claims",
        2,
        "",
        "",
    )
    assert query["until"] - query["since"] == timedelta(days=7)
    assert abs(query["until"] - timezone.now()) < timedelta(minutes=1)


def test_every_page_s_window_defaults_to_the_heatmap_s_seven_days_before_until():
    for form in (
        WindowForm({"until": "2026-11-30T00:00"}),
        HeatmapForm({"until": "2026-11-30T00:00"}),
    ):
        assert form.is_valid(), form.errors
        assert form.cleaned_data["since"] == datetime(2026, 11, 23, tzinfo=UTC)


def test_a_window_sent_with_an_offset_is_read_in_the_server_s_time_zone():
    form = WindowForm({"since": "2026-11-01T12:00:00+02:00", "until": "2026-11-02T12:00Z"})
    assert form.is_valid(), form.errors
    assert form.cleaned_data["since"] == datetime(2026, 11, 1, 10, tzinfo=UTC)
    assert form.cleaned_data["since"].utcoffset() == timedelta(0)


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        ({"mode": "heat"}, {"mode": ['"heat" is not a valid choice.']}),
        ({"depth": "0"}, {"depth": ["Ensure this value is greater than or equal to 1."]}),
        ({"depth": "9"}, {"depth": ["Ensure this value is less than or equal to 8."]}),
        ({"depth": "two"}, {"depth": ["A valid integer is required."]}),
        ({"since": "yesterday"}, {"since": [ISO]}),
        ({"until": "2026-13-01"}, {"until": [ISO]}),
        (
            {"since": "2026-11-02T00:00Z", "until": "2026-11-01T00:00Z"},
            {"since": ["since must be earlier than until."]},
        ),
        (
            {"project": "x" * 101},
            {"project": ["Ensure this field has no more than 100 characters."]},
        ),
        (
            {"prefix": "x" * 1025},
            {"prefix": ["Ensure this field has no more than 1024 characters."]},
        ),
        ({"prefix": "a\x00b"}, {"prefix": ["Null characters are not allowed."]}),
        ({"until": "0001-01-01T00:00Z"}, {"since": [OUT_OF_RANGE]}),
        ({"since": "0001-01-01T00:00+01:00"}, {"since": [OUT_OF_RANGE]}),
    ],
)
def test_a_bad_field_is_named_with_the_api_s_message(data, expected):
    assert errors(HeatmapForm, data) == expected


def test_the_window_is_judged_only_once_every_field_parses():
    data = {"depth": "0", "since": "2026-11-02T00:00Z", "until": "2026-11-01T00:00Z"}
    assert list(errors(HeatmapForm, data)) == ["depth"]


def test_a_prefix_keeps_its_spaces_a_project_key_does_not():
    form = HeatmapForm({"prefix": " src", "project": " core "})
    assert form.is_valid(), form.errors
    assert (form.cleaned_data["prefix"], form.cleaned_data["project"]) == (" src", "core")
