#include "image/resize.h"

#include <opencv2/imgproc.hpp>

#include "image/check.h"
#include "image/cv_mat.h"
#include "image/error.h"

namespace gen3d::image {

Image resize_image(const Image& image, int width, int height, const std::string& filter) {
  detail::require_pixels(image, "resize_image");
  if (width <= 0 || height <= 0) throw ImageError("resize_image: the target size must be positive");
  if (width == image.width && height == image.height) return image;
  int interpolation = cv::INTER_LINEAR;
  if (filter == "area")
    interpolation = cv::INTER_AREA;
  else if (filter == "cubic")
    interpolation = cv::INTER_CUBIC;
  else if (filter != "linear")
    throw ImageError("resize_image: unknown filter \"" + filter + "\"");
  cv::Mat out;
  cv::resize(detail::as_mat(image), out, {width, height}, 0, 0, interpolation);
  if (filter == "cubic") out = cv::min(cv::max(out, 0.0), 1.0);
  return detail::from_mat(out);
}

}  // namespace gen3d::image
