"""Discovery from a Kubernetes API server: a Service's EndpointSlices, an InferencePool's pods,
and a namespace's InferencePools.

The sources (IO): ``slice_source.KubernetesSource`` (a Service's EndpointSlices),
``inference_pool_source.InferencePoolSource`` (an InferencePool and the pods it selects) and
``inference_pool_catalog.InferencePoolCatalog`` (the usable InferencePools' names), each a
``watched.WatchedSource``, the one shell around their list/watch loops (start on the first
fetch, wait for the first list, raise while nothing is listed, close). Beneath them:
``list_watch`` (the paged list and watch protocol on raw JSON, and ``follow``, the one
list-watch-relist loop), ``client`` (kubeconfig or service account; ``kubernetes_asyncio`` is
imported only when a source first connects) and ``pod_reader`` (one GET per new pod).
The parsers (pure): ``slices`` (EndpointSlices -> endpoints), ``pods`` (a pod's labels and
annotations -> facts) and ``inference_pool`` (an InferencePool's spec, and its pods ->
endpoints).
"""

from xds_control.discovery.kubernetes.inference_pool import FailureMode
from xds_control.discovery.kubernetes.inference_pool_catalog import InferencePoolCatalog
from xds_control.discovery.kubernetes.inference_pool_source import InferencePoolSource
from xds_control.discovery.kubernetes.slice_source import KubernetesSource
from xds_control.discovery.kubernetes.watched import WatchedSource

__all__ = [
    "FailureMode",
    "InferencePoolCatalog",
    "InferencePoolSource",
    "KubernetesSource",
    "WatchedSource",
]
