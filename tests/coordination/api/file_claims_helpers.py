"""What the file claims' API tests share: a listing's rows."""

from tests.api_helpers import V1


def listed(client, url):
    response = client.get(f"{V1}{url}")
    assert response.status_code == 200, response.content
    return response.json()["results"]
