"""Contract checks over every admin handler module (configs, ACLs, features, producer ids,
reassignment listing): the HANDLERS tables are disjoint, answer with the response of their own
API key, and never mutate the image they are given (``kraft.controller.result``)."""

from __future__ import annotations

import copy

import pytest

from kraft.controller import acls, configs, features, producer_ids, reassignments
from kraft.metadata import ConfigRecord
from kraft.metadata.configs import TOPIC
from kraft.protocol import RESPONSES
from kraft.protocol import (AllocateProducerIdsRequest, AlterConfigsRequest, CreateAclsRequest, DeleteAclsRequest,
                            DescribeAclsRequest, DescribeConfigsRequest, IncrementalAlterConfigsRequest,
                            ListPartitionReassignmentsRequest, UpdateFeaturesRequest)
from admin_fixtures import apply, cluster_image, context

MODULES = (acls, configs, features, producer_ids, reassignments)

REQUESTS = [
    IncrementalAlterConfigsRequest(resources=[IncrementalAlterConfigsRequest.Resource(
        resource_type=TOPIC, resource_name="foo", configs=[IncrementalAlterConfigsRequest.Resource.Config(
            name="cleanup.policy", config_operation=2, value="compact")])]),
    AlterConfigsRequest(resources=[AlterConfigsRequest.Resource(resource_type=TOPIC, resource_name="foo")]),
    DescribeConfigsRequest(resources=[DescribeConfigsRequest.Resource(resource_type=TOPIC, resource_name="foo")],
                           include_synonyms=True),
    CreateAclsRequest(creations=[CreateAclsRequest.Creation(resource_type=2, resource_name="foo",
                                                            resource_pattern_type=3, principal="User:a", host="*",
                                                            operation=3, permission_type=3)]),
    DescribeAclsRequest(resource_type_filter=1, pattern_type_filter=1, operation=1, permission_type=1),
    DeleteAclsRequest(filters=[DeleteAclsRequest.Filter(resource_type_filter=1, pattern_type_filter=1, operation=1,
                                                        permission_type=1)]),
    UpdateFeaturesRequest(feature_updates=[UpdateFeaturesRequest.FeatureUpdate(feature="metadata.version",
                                                                               max_version_level=22)]),
    AllocateProducerIdsRequest(broker_id=1, broker_epoch=100),
    ListPartitionReassignmentsRequest(topics=None),
]


def test_handler_tables_are_disjoint_and_cover_the_admin_apis():
    keys = [k for m in MODULES for k in m.HANDLERS]
    assert len(keys) == len(set(keys))
    assert set(keys) == {29, 30, 31, 32, 33, 44, 46, 57, 67}


@pytest.mark.parametrize("request_", REQUESTS, ids=lambda r: type(r).__name__)
def test_handler_answers_its_own_api_and_leaves_the_image_alone(request_):
    image = apply(cluster_image(), [ConfigRecord(resource_type=TOPIC, resource_name="foo", name="retention.ms",
                                                 value="5")])
    image = apply(image, acls.handle_create_acls(context(image, 3), REQUESTS[3]).records)
    before = copy.deepcopy(image)
    handler = next(m.HANDLERS[request_.API_KEY] for m in MODULES if request_.API_KEY in m.HANDLERS)
    version = type(request_).MAX_VERSION
    result = handler(context(image, version), request_)
    assert type(result.response) is RESPONSES[request_.API_KEY]
    result.response.encode(version)  # always encodable at the request's version
    assert image == before
