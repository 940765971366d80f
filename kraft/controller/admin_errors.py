"""The one-error answers of the admin APIs (configs, ACLs, features, producer ids,
reassignment listing): what a controller sends when it cannot run the handler at all
(NOT_CONTROLLER, or an ``ApiError`` raised for the whole request).

Each builder has the ``ERROR_RESPONSES`` signature of ``handlers.py``:
``(request, version, code, message) -> Response``. Per-resource APIs repeat the error on every
resource so a client matching answers to its request finds each one.
"""

from __future__ import annotations

from kraft.protocol.messages import (AllocateProducerIdsResponse, AlterConfigsResponse, CreateAclsResponse,
                                     DeleteAclsResponse, DescribeAclsResponse, DescribeConfigsResponse,
                                     IncrementalAlterConfigsResponse, ListPartitionReassignmentsResponse,
                                     UpdateFeaturesResponse)


def _alter_configs_error(response_cls):
    def build(req, version, code, message=None):
        R = response_cls.Resource
        return response_cls(responses=[R(error_code=int(code), error_message=message, resource_type=r.resource_type,
                                         resource_name=r.resource_name) for r in req.resources])
    return build


def describe_configs_error(req, version, code, message=None):
    R = DescribeConfigsResponse.Result
    return DescribeConfigsResponse(results=[R(error_code=int(code), error_message=message,
                                              resource_type=r.resource_type, resource_name=r.resource_name,
                                              configs=[]) for r in req.resources])


def create_acls_error(req, version, code, message=None):
    R = CreateAclsResponse.Result
    return CreateAclsResponse(results=[R(error_code=int(code), error_message=message) for _ in req.creations])


def delete_acls_error(req, version, code, message=None):
    R = DeleteAclsResponse.FilterResult
    return DeleteAclsResponse(filter_results=[R(error_code=int(code), error_message=message, matching_acls=[])
                                              for _ in req.filters])


def describe_acls_error(req, version, code, message=None):
    return DescribeAclsResponse(error_code=int(code), error_message=message, resources=[])


def update_features_error(req, version, code, message=None):
    return UpdateFeaturesResponse(error_code=int(code), error_message=message, results=[])


def allocate_producer_ids_error(req, version, code, message=None):
    return AllocateProducerIdsResponse(error_code=int(code), producer_id_start=-1, producer_id_len=0)


def list_reassignments_error(req, version, code, message=None):
    return ListPartitionReassignmentsResponse(error_code=int(code), error_message=message, topics=[])


ERROR_RESPONSES = {
    44: _alter_configs_error(IncrementalAlterConfigsResponse),
    33: _alter_configs_error(AlterConfigsResponse),
    32: describe_configs_error,
    30: create_acls_error,
    29: describe_acls_error,
    31: delete_acls_error,
    57: update_features_error,
    67: allocate_producer_ids_error,
    46: list_reassignments_error,
}
