# Runs one golden case: `racksim ARGS` in WORKDIR, then compares the exit code and the output
# (stdout for reports, stderr for errors) with the stored expectation.
#   -DRACKSIM=... -DWORKDIR=... -DARGS="run;errors/x.yaml" -DEXPECT_FILE=... -DEXPECT_CODE=1 -DSTREAM=stderr
#   -DUPDATE=1 rewrites the expectation instead of comparing.
execute_process(COMMAND ${RACKSIM} ${ARGS}
                WORKING_DIRECTORY ${WORKDIR}
                RESULT_VARIABLE code OUTPUT_VARIABLE out ERROR_VARIABLE err
                TIMEOUT 60)
if(STREAM STREQUAL "stderr")
  set(got "${err}")
else()
  set(got "${out}")
endif()
if(UPDATE)
  file(WRITE ${EXPECT_FILE} "${got}")
  message(STATUS "updated ${EXPECT_FILE} (exit ${code})")
  return()
endif()
if(NOT code STREQUAL EXPECT_CODE)
  message(FATAL_ERROR "exit code ${code}, expected ${EXPECT_CODE}\nstdout:\n${out}\nstderr:\n${err}")
endif()
file(READ ${EXPECT_FILE} want)
if(NOT got STREQUAL want)
  message(FATAL_ERROR "output differs from ${EXPECT_FILE}\n--- expected\n${want}\n--- got\n${got}")
endif()
