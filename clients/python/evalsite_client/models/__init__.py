"""Contains all the data models used in inputs/outputs"""

from .board_out import BoardOut
from .board_out_judge_corrected_type_0 import BoardOutJudgeCorrectedType0
from .board_out_scales import BoardOutScales
from .board_out_weights import BoardOutWeights
from .board_query import BoardQuery
from .board_query_common import BoardQueryCommon
from .board_query_correction import BoardQueryCorrection
from .board_query_dir_type_0 import BoardQueryDirType0
from .board_query_pairs import BoardQueryPairs
from .board_query_scoring import BoardQueryScoring
from .board_query_values import BoardQueryValues
from .board_row import BoardRow
from .board_row_corrected_type_0 import BoardRowCorrectedType0
from .board_row_overall import BoardRowOverall
from .board_row_overall_ci import BoardRowOverallCi
from .board_row_subjects import BoardRowSubjects
from .board_stats import BoardStats
from .board_subject import BoardSubject
from .corpus_out import CorpusOut
from .cost_out import CostOut
from .dataset_out import DatasetOut
from .dataset_out_mapping import DatasetOutMapping
from .decision_in import DecisionIn
from .draft_item_out import DraftItemOut
from .draft_out import DraftOut
from .draft_out_counts import DraftOutCounts
from .endpoint_create_body import EndpointCreateBody
from .endpoint_edit_body import EndpointEditBody
from .endpoint_out import EndpointOut
from .endpoint_out_config import EndpointOutConfig
from .error import Error
from .failed_group import FailedGroup
from .failed_item import FailedItem
from .failed_items_kind import FailedItemsKind
from .failed_out import FailedOut
from .failed_query import FailedQuery
from .failed_query_kind import FailedQueryKind
from .failed_round import FailedRound
from .failed_round_messages_type_0_item import FailedRoundMessagesType0Item
from .gate_in import GateIn
from .gate_out import GateOut
from .gate_subject_out import GateSubjectOut
from .generation_in import GenerationIn
from .generation_in_logging_mode import GenerationInLoggingMode
from .generator_create_body import GeneratorCreateBody
from .generator_version_body import GeneratorVersionBody
from .judge_create_body import JudgeCreateBody
from .judge_named import JudgeNamed
from .judge_run_in import JudgeRunIn
from .judge_run_in_logging_mode import JudgeRunInLoggingMode
from .judge_version import JudgeVersion
from .judge_version_body import JudgeVersionBody
from .leaderboard_common import LeaderboardCommon
from .leaderboard_correction import LeaderboardCorrection
from .leaderboard_dir_type_0 import LeaderboardDirType0
from .leaderboard_export_common import LeaderboardExportCommon
from .leaderboard_export_correction import LeaderboardExportCorrection
from .leaderboard_export_dir_type_0 import LeaderboardExportDirType0
from .leaderboard_export_format import LeaderboardExportFormat
from .leaderboard_export_pairs import LeaderboardExportPairs
from .leaderboard_export_scoring import LeaderboardExportScoring
from .leaderboard_export_values import LeaderboardExportValues
from .leaderboard_pairs import LeaderboardPairs
from .leaderboard_scoring import LeaderboardScoring
from .leaderboard_values import LeaderboardValues
from .named import Named
from .pairwise_board_out import PairwiseBoardOut
from .pairwise_export_format import PairwiseExportFormat
from .pairwise_export_source import PairwiseExportSource
from .pairwise_in import PairwiseIn
from .pairwise_in_logging_mode import PairwiseInLoggingMode
from .pairwise_leaderboard_source import PairwiseLeaderboardSource
from .pairwise_query import PairwiseQuery
from .pairwise_query_source import PairwiseQuerySource
from .pairwise_row import PairwiseRow
from .problem import Problem
from .resume_run_relaunch_in import ResumeRunRelaunchIn
from .resume_run_relaunch_in_mode import ResumeRunRelaunchInMode
from .run_cost_out import RunCostOut
from .run_export_format import RunExportFormat
from .run_out import RunOut
from .saved_out import SavedOut
from .scale import Scale
from .script_run_in import ScriptRunIn
from .script_run_in_logging_mode import ScriptRunInLoggingMode
from .simulation_run_in import SimulationRunIn
from .simulation_run_in_logging_mode import SimulationRunInLoggingMode
from .task_detail_out import TaskDetailOut
from .task_out import TaskOut
from .template_create_body import TemplateCreateBody
from .template_version_body import TemplateVersionBody
from .upload_dataset_multi_part_body_params import UploadDatasetMultiPartBodyParams
from .upload_dataset_multi_part_body_params_format import (
    UploadDatasetMultiPartBodyParamsFormat,
)
from .upload_in import UploadIn
from .upload_in_format import UploadInFormat
from .version_out import VersionOut
from .version_out_config import VersionOutConfig

__all__ = (
    "BoardOut",
    "BoardOutJudgeCorrectedType0",
    "BoardOutScales",
    "BoardOutWeights",
    "BoardQuery",
    "BoardQueryCommon",
    "BoardQueryCorrection",
    "BoardQueryDirType0",
    "BoardQueryPairs",
    "BoardQueryScoring",
    "BoardQueryValues",
    "BoardRow",
    "BoardRowCorrectedType0",
    "BoardRowOverall",
    "BoardRowOverallCi",
    "BoardRowSubjects",
    "BoardStats",
    "BoardSubject",
    "CorpusOut",
    "CostOut",
    "DatasetOut",
    "DatasetOutMapping",
    "DecisionIn",
    "DraftItemOut",
    "DraftOut",
    "DraftOutCounts",
    "EndpointCreateBody",
    "EndpointEditBody",
    "EndpointOut",
    "EndpointOutConfig",
    "Error",
    "FailedGroup",
    "FailedItem",
    "FailedItemsKind",
    "FailedOut",
    "FailedQuery",
    "FailedQueryKind",
    "FailedRound",
    "FailedRoundMessagesType0Item",
    "GateIn",
    "GateOut",
    "GateSubjectOut",
    "GenerationIn",
    "GenerationInLoggingMode",
    "GeneratorCreateBody",
    "GeneratorVersionBody",
    "JudgeCreateBody",
    "JudgeNamed",
    "JudgeRunIn",
    "JudgeRunInLoggingMode",
    "JudgeVersion",
    "JudgeVersionBody",
    "LeaderboardCommon",
    "LeaderboardCorrection",
    "LeaderboardDirType0",
    "LeaderboardExportCommon",
    "LeaderboardExportCorrection",
    "LeaderboardExportDirType0",
    "LeaderboardExportFormat",
    "LeaderboardExportPairs",
    "LeaderboardExportScoring",
    "LeaderboardExportValues",
    "LeaderboardPairs",
    "LeaderboardScoring",
    "LeaderboardValues",
    "Named",
    "PairwiseBoardOut",
    "PairwiseExportFormat",
    "PairwiseExportSource",
    "PairwiseIn",
    "PairwiseInLoggingMode",
    "PairwiseLeaderboardSource",
    "PairwiseQuery",
    "PairwiseQuerySource",
    "PairwiseRow",
    "Problem",
    "ResumeRunRelaunchIn",
    "ResumeRunRelaunchInMode",
    "RunCostOut",
    "RunExportFormat",
    "RunOut",
    "SavedOut",
    "Scale",
    "ScriptRunIn",
    "ScriptRunInLoggingMode",
    "SimulationRunIn",
    "SimulationRunInLoggingMode",
    "TaskDetailOut",
    "TaskOut",
    "TemplateCreateBody",
    "TemplateVersionBody",
    "UploadDatasetMultiPartBodyParams",
    "UploadDatasetMultiPartBodyParamsFormat",
    "UploadIn",
    "UploadInFormat",
    "VersionOut",
    "VersionOutConfig",
)
