// launch_info_from_env under each launcher's variables: which one wins when
// several are set, the defaults, and the errors for values that cannot be a
// rank. Every variable ember reads is removed for the test and put back
// afterwards (under mpirun, OpenMPI's own are set).
#include <optional>

#include "support/dist_comm.h"
#include "support/scoped_env.h"
#include "support/support.h"

using namespace ember;
using namespace ember::test;

namespace {

constexpr const char* kVars[] = {
    "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK",
    "PMI_RANK",             "PMI_SIZE",             "MPI_LOCALRANKID",
    "SLURM_PROCID",         "SLURM_NTASKS",         "SLURM_LOCALID"};

// Every launcher variable removed, then `set` applied, for one scope.
class LauncherEnv {
  public:
    explicit LauncherEnv(std::initializer_list<std::pair<const char*, const char*>> set = {}) {
        for (const char* v : kVars) cleared_.push_back(std::make_unique<ScopedEnv>(v, std::nullopt));
        for (auto [name, value] : set) set_.push_back(std::make_unique<ScopedEnv>(name, value));
    }

  private:
    // Destroyed in reverse: the values set go first, then the originals return.
    std::vector<std::unique_ptr<ScopedEnv>> cleared_, set_;
};

void check_info(const dist::LaunchInfo& info, int rank, int size, int local,
                const std::string& launcher) {
    CHECK(info.rank == rank);
    CHECK(info.size == size);
    CHECK(info.local_rank == local);
    CHECK(info.launcher == launcher);
}

}  // namespace

TEST_CASE("launch_info_from_env: no launcher is rank 0 of 1", "[dist][env]") {
    LauncherEnv env;
    check_info(dist::launch_info_from_env(), 0, 1, 0, "none");
    // "auto" then needs no MPI at all.
    CHECK(dist::init("auto")->backend() == "single");
}

TEST_CASE("launch_info_from_env reads each launcher's variables", "[dist][env]") {
    {
        LauncherEnv env({{"OMPI_COMM_WORLD_RANK", "3"},
                         {"OMPI_COMM_WORLD_SIZE", "8"},
                         {"OMPI_COMM_WORLD_LOCAL_RANK", "1"}});
        check_info(dist::launch_info_from_env(), 3, 8, 1, "openmpi");
    }
    {
        LauncherEnv env({{"PMI_RANK", "5"}, {"PMI_SIZE", "6"}, {"MPI_LOCALRANKID", "2"}});
        check_info(dist::launch_info_from_env(), 5, 6, 2, "mpich");
    }
    {
        LauncherEnv env({{"SLURM_PROCID", "9"}, {"SLURM_NTASKS", "16"}, {"SLURM_LOCALID", "4"}});
        check_info(dist::launch_info_from_env(), 9, 16, 4, "slurm");
    }
    {
        // Without a local rank: 0 (one rank per machine).
        LauncherEnv env({{"SLURM_PROCID", "1"}, {"SLURM_NTASKS", "2"}});
        check_info(dist::launch_info_from_env(), 1, 2, 0, "slurm");
    }
    {
        // A one-rank job under a launcher: "auto" stays a single process.
        LauncherEnv env({{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "1"}});
        CHECK(dist::init("auto")->backend() == "single");
    }
}

TEST_CASE("launch_info_from_env: OpenMPI before MPICH before Slurm", "[dist][env]") {
    {
        // `srun --mpi=pmix` of OpenMPI sets both OpenMPI's and Slurm's.
        LauncherEnv env({{"OMPI_COMM_WORLD_RANK", "2"},
                         {"OMPI_COMM_WORLD_SIZE", "4"},
                         {"OMPI_COMM_WORLD_LOCAL_RANK", "0"},
                         {"PMI_RANK", "1"},
                         {"PMI_SIZE", "5"},
                         {"MPI_LOCALRANKID", "1"},
                         {"SLURM_PROCID", "7"},
                         {"SLURM_NTASKS", "9"},
                         {"SLURM_LOCALID", "3"}});
        check_info(dist::launch_info_from_env(), 2, 4, 0, "openmpi");
    }
    {
        LauncherEnv env({{"PMI_RANK", "1"},
                         {"PMI_SIZE", "5"},
                         {"MPI_LOCALRANKID", "1"},
                         {"SLURM_PROCID", "7"},
                         {"SLURM_NTASKS", "9"},
                         {"SLURM_LOCALID", "3"}});
        check_info(dist::launch_info_from_env(), 1, 5, 1, "mpich");
    }
    {
        // A scheme's local rank never comes from another scheme's variable.
        LauncherEnv env({{"PMI_RANK", "1"}, {"PMI_SIZE", "5"}, {"SLURM_LOCALID", "3"}});
        check_info(dist::launch_info_from_env(), 1, 5, 0, "mpich");
    }
}

TEST_CASE("launch_info_from_env: inconsistent values name the variable", "[dist][env]") {
    {
        LauncherEnv env({{"OMPI_COMM_WORLD_RANK", "2"}, {"OMPI_COMM_WORLD_SIZE", "2"}});
        REQUIRE_THROWS_WITH_MSG(dist::launch_info_from_env(),
                                "the launcher's environment is inconsistent: "
                                "OMPI_COMM_WORLD_RANK=2, OMPI_COMM_WORLD_SIZE=2");
    }
    {
        // A rank without a size.
        LauncherEnv env({{"PMI_RANK", "0"}});
        REQUIRE_THROWS_WITH_MSG(dist::launch_info_from_env(), "PMI_RANK=0, PMI_SIZE=-1");
    }
    {
        LauncherEnv env({{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "0"}});
        REQUIRE_THROWS_WITH_MSG(dist::launch_info_from_env(), "SLURM_PROCID=0, SLURM_NTASKS=0");
    }
    {
        // The first scheme present decides: a bad OpenMPI rank is not
        // papered over by Slurm's good values.
        LauncherEnv env({{"OMPI_COMM_WORLD_RANK", "4"},
                         {"OMPI_COMM_WORLD_SIZE", "2"},
                         {"SLURM_PROCID", "0"},
                         {"SLURM_NTASKS", "2"}});
        REQUIRE_THROWS_WITH_MSG(dist::launch_info_from_env(), "OMPI_COMM_WORLD_RANK=4");
    }
    {
        LauncherEnv env({{"PMI_RANK", "one"}, {"PMI_SIZE", "2"}});
        REQUIRE_THROWS_WITH_MSG(dist::launch_info_from_env(),
                                "environment variable PMI_RANK='one' is not a rank or a size");
    }
    {
        LauncherEnv env({{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "2x"}});
        REQUIRE_THROWS_WITH_MSG(dist::launch_info_from_env(), "SLURM_NTASKS='2x'");
    }
    {
        LauncherEnv env({{"OMPI_COMM_WORLD_RANK", "-1"}, {"OMPI_COMM_WORLD_SIZE", "2"}});
        REQUIRE_THROWS_WITH_MSG(dist::launch_info_from_env(), "OMPI_COMM_WORLD_RANK='-1'");
    }
    {
        LauncherEnv env({{"OMPI_COMM_WORLD_RANK", "0"},
                         {"OMPI_COMM_WORLD_SIZE", "2"},
                         {"OMPI_COMM_WORLD_LOCAL_RANK", ""}});
        REQUIRE_THROWS_WITH_MSG(dist::launch_info_from_env(), "OMPI_COMM_WORLD_LOCAL_RANK=''");
    }
    {
        // init reads the same variables and fails the same way, before MPI.
        LauncherEnv env({{"SLURM_PROCID", "3"}, {"SLURM_NTASKS", "2"}});
        REQUIRE_THROWS_WITH_MSG(dist::init("auto"), "SLURM_PROCID=3, SLURM_NTASKS=2");
    }
}
