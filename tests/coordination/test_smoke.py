def test_claim_smoke(api, issue, make_session):
    session = make_session()
    response = api.post(f"/api/v1/issues/{issue.pk}/claim/", {"session": session.pk}, format="json")
    assert response.status_code == 201, response.json()
