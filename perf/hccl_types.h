/*
 * hccl_types.h - the benchmarks' element types (perf_type, perf_common.h) as libhccl's
 * HcclDataType: what hccl_perf.c passes to the library, and the type tests/perf/test_perf_data.c
 * hands the library's kernels. Header only: one table, in each file that includes it.
 */
#ifndef HCCL_PERF_HCCL_TYPES_H
#define HCCL_PERF_HCCL_TYPES_H

#include "hccl.h"
#include "perf_common.h"

static const HcclDataType perf_hccl_dtype[PERF_NTYPES] = {
    [PERF_INT8] = HCCL_DATA_TYPE_INT8,   [PERF_UINT8] = HCCL_DATA_TYPE_UINT8,
    [PERF_INT16] = HCCL_DATA_TYPE_INT16, [PERF_UINT16] = HCCL_DATA_TYPE_UINT16,
    [PERF_INT32] = HCCL_DATA_TYPE_INT32, [PERF_UINT32] = HCCL_DATA_TYPE_UINT32,
    [PERF_INT64] = HCCL_DATA_TYPE_INT64, [PERF_UINT64] = HCCL_DATA_TYPE_UINT64,
    [PERF_HALF] = HCCL_DATA_TYPE_FP16,   [PERF_BF16] = HCCL_DATA_TYPE_BFP16,
    [PERF_FLOAT] = HCCL_DATA_TYPE_FP32,  [PERF_DOUBLE] = HCCL_DATA_TYPE_FP64,
};

#endif
