"""The licences Benchsmith knows: what a release may carry and what the families' sources are under.

`releases/` writes them into dataset cards and Croissant metadata; the configuration checks
`release.generated_license` and `release.source_licenses` against them when it loads, so a typo
or a relabelled source is refused before anything is built.
"""

from __future__ import annotations

LICENSE_URLS = {
    "cc-by-4.0": "https://creativecommons.org/licenses/by/4.0/",
    "cc-by-sa-4.0": "https://creativecommons.org/licenses/by-sa/4.0/",
    "cc-by-nc-4.0": "https://creativecommons.org/licenses/by-nc/4.0/",
    "cc-by-nc-sa-4.0": "https://creativecommons.org/licenses/by-nc-sa/4.0/",
    "cc0-1.0": "https://creativecommons.org/publicdomain/zero/1.0/",
    "mit": "https://opensource.org/licenses/MIT",
    "apache-2.0": "https://www.apache.org/licenses/LICENSE-2.0",
}
# The licences of the sources the families read (their dataset cards). `release.source_licenses`
# may add one for a source not listed here, never change one listed: a configuration cannot relabel
# data its authors released under other terms. A source missing here and there has an unknown
# licence, and a release of it is refused.
LICENSES = {
    "fld": "cc-by-4.0",  # the FLD corpus (its generator's code is Apache-2.0)
    "folio": "cc-by-sa-4.0",
    "scienceqa": "cc-by-nc-sa-4.0",
    # Instruction Boundary's paper datasets (their Hugging Face dataset cards): cais/mmlu, TIGER-Lab/MMLU-Pro
    # and tau/commonsense_qa are MIT, truthfulqa/truthful_qa Apache-2.0. MultiRC has no standard licence
    # (SuperGLUE's card: "other", its sources' terms for research use): a release of it names one under
    # release.source_licenses, or is refused.
    "mmlu": "mit",
    "mmlu_pro": "mit",
    "commonsenseqa": "mit",
    "truthfulqa": "apache-2.0",
}
